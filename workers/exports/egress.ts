// The exports role's egress policy: the coordination's (shared with plugins' fetch), refusals
// reported as ExportErrors (egress_refused and not_found: neither is retried).
import { egressPolicy, type EgressPolicy } from '../coordination/index.js';
import { ExportError } from './errors.js';

export type { EgressPolicy };

export function exportEgressPolicy(allow: string): EgressPolicy {
  return egressPolicy(allow, {
    setting: 'EXPORT_EGRESS_ALLOW',
    what: 'destination host',
    refused: (message) => new ExportError('egress_refused', message),
    notFound: (message) => new ExportError('not_found', message),
  });
}
