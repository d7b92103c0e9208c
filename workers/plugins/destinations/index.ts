// Destinations (docs/plugins.md, "Destinations"): a config's onEvent and composeWebhook run on
// every processed event of its project, from PROCESSED, by the worker holding the config.
export { startDelivery, type Delivery, type DeliverySettings } from './delivery.js';
export { ProcessedFeed, type FeedStart } from './processed-feed.js';
export { toWebhook, WebhookSender, type Webhook, type WebhookSettings } from './webhooks.js';
