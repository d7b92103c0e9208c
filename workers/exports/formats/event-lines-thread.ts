// Entry of the exports role's formatting threads (line-pool.ts): one task, one PROCESSED message.
import { formatEventLines, type EventLines, type EventLinesTask } from './event-lines.js';

export default function formatTask(task: EventLinesTask): EventLines {
  return formatEventLines(task);
}
