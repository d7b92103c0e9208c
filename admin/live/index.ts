// The live cluster page the admin server serves at GET / (live-routes.ts lists what it serves).
export { LiveFigures, type Figures, type LiveSources } from './live-figures.js';
export { liveRoutes } from './live-routes.js';
export { StreamSizes } from './stream-sizes.js';
