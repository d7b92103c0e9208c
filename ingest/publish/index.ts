// Publishing to JetStream: which subject each segment goes to (spike detection included), and
// the publisher that packs them into messages and says when they are stored.
export { EventPublisher, type PublishItem, type PublisherOptions } from './publisher.js';
export { routeSegments } from './route-segments.js';
export { SpikeLimiter, type SpikeLimiterOptions } from './spike-limiter.js';
