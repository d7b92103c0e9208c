// A real DNS server on loopback (dns2, UDP) answering TXT queries from a map the test fills.
// Unknown names get NXDOMAIN.
import dns2 from 'dns2';

export interface TestDnsServer extends AsyncDisposable {
  /** host:port, as DNS_RESOLVER takes it. */
  address: string;
  setTxt(name: string, values: string[]): void;
  clear(name: string): void;
  queries: string[];
  stop(): Promise<void>;
}

const NXDOMAIN = 3;

export async function startDnsServer(): Promise<TestDnsServer> {
  const zone = new Map<string, string[]>();
  const queries: string[] = [];
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = dns2.Packet.createResponseFromRequest(request);
      const question = request.questions[0];
      if (question) {
        const name = question.name.toLowerCase();
        queries.push(name);
        const values = zone.get(name);
        if (!values) response.header.rcode = NXDOMAIN;
        else if (question.type === dns2.Packet.TYPE.TXT) {
          for (const data of values) {
            response.answers.push({ name: question.name, type: dns2.Packet.TYPE.TXT, class: dns2.Packet.CLASS.IN, ttl: 1, data } as dns2.Packet.Resource);
          }
        }
      }
      void send(response);
    },
  });
  const addresses = await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const stop = () => server.close();
  return {
    address: `127.0.0.1:${addresses.udp!.port}`,
    setTxt: (name, values) => zone.set(name.toLowerCase(), values),
    clear: (name) => zone.delete(name.toLowerCase()),
    queries,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
