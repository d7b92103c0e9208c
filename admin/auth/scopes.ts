// API key scopes: `<object>:read|write` or `*`. `:write` implies `:read`; `*` allows everything.
export const SCOPE_OBJECTS = [
  'organization',
  'organization_member',
  'project',
  'batch_export',
  'plugin',
] as const;

export type ScopeObject = (typeof SCOPE_OBJECTS)[number];
export type Scope = `${ScopeObject}:${'read' | 'write'}`;

export const ALL_SCOPES: readonly Scope[] = SCOPE_OBJECTS.flatMap((o) => [`${o}:read`, `${o}:write`] as Scope[]);

export function isScope(value: string): value is Scope {
  return (ALL_SCOPES as readonly string[]).includes(value);
}

export function hasScope(granted: readonly string[], required: Scope): boolean {
  if (granted.includes('*') || granted.includes(required)) return true;
  const [object, action] = required.split(':');
  return action === 'read' && granted.includes(`${object}:write`);
}

/**
 * Parses the CLI form `a:read,b:write` or `*`. Throws naming every unknown scope, so a typo
 * cannot silently mint a key that can do less (or, with a wildcard typo, more) than intended.
 */
export function parseScopes(text: string): string[] {
  const parts = [...new Set(text.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
  if (parts.length === 0) throw new Error('no scopes given');
  if (parts.includes('*')) {
    if (parts.length > 1) throw new Error("'*' already allows everything; give it alone");
    return ['*'];
  }
  const unknown = parts.filter((p) => !isScope(p));
  if (unknown.length > 0) {
    throw new Error(`unknown scope(s): ${unknown.join(', ')} (known: ${ALL_SCOPES.join(', ')}, or '*')`);
  }
  return parts;
}
