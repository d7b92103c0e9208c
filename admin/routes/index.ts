// Every route of the management API, in documentation order.
import type { Route } from '../http/route.js';
import { batchExportRoutes } from './batch-exports.js';
import { domainRoutes } from './domains.js';
import { inviteRoutes } from './invites.js';
import { memberRoutes } from './members.js';
import { organizationRoutes } from './organizations.js';
import { pluginConfigRoutes } from './plugin-configs.js';
import { pluginRoutes } from './plugins.js';
import { projectRoutes } from './projects.js';

export const apiRoutes: readonly Route[] = [
  ...organizationRoutes,
  ...domainRoutes,
  ...inviteRoutes,
  ...memberRoutes,
  ...projectRoutes,
  ...batchExportRoutes,
  ...pluginRoutes,
  ...pluginConfigRoutes,
];
