// Publishing to JetStream: whether a project's request may be published now (its limits), which
// subject each segment goes to (spike detection included), and the publisher that packs them
// into messages and says when they are stored.
export { EventPublisher, type PublishItem, type PublisherOptions } from './publisher.js';
export { ProjectLimiter, type LimitDecision, type LimitedRequest, type ProjectLimitName } from './project-limiter.js';
export { routeSegments } from './route-segments.js';
export { SpikeLimiter, type SpikeLimiterOptions } from './spike-limiter.js';
