// Lint rules from STYLE.md: promises handled, type-only imports marked, and shared code
// flowing inward (lib/ imports nothing of ours and none of uWS, pg or piscina).
import tseslint from 'typescript-eslint';

/** What a deployable's code may not import: lib/ only through its entry, no other deployable. */
function deployablePatterns(self) {
  return [
    { group: ['**/lib/*', '!**/lib/index.js'], message: 'Import lib through its entry, lib/index.js.' },
    {
      group: ['ingest', 'admin', 'workers', 'deploy', 'bench', 'cli', 'test'].filter((d) => d !== self).map((d) => `**/${d}/**`),
      message: 'Deployables import only lib/.',
    },
  ];
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.data/**', 'bench/results/**', 'coverage/**', 'eslint.config.js'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
    },
  },
  // Import boundaries (ARCHITECTURE.md): globs match at any depth ('../../workers/x.js' too).
  {
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/ingest/**', '**/admin/**', '**/workers/**', '**/deploy/**', '**/bench/**', '**/test/**', '**/cli/**'], message: 'lib/ imports nothing of ours.' },
            { group: ['uWebSockets.js', 'pg', 'piscina'], message: 'lib/ stays free of uWS, pg and piscina.' },
          ],
        },
      ],
    },
  },
  ...['ingest', 'admin', 'workers'].map((self) => ({
    files: [`${self}/**/*.ts`],
    ignores: ['**/*.test.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: deployablePatterns(self) }] },
  })),
  {
    // What a parse thread runs is pure: bytes in, packed events out. No sockets, no broker, no
    // pool (ARCHITECTURE.md, invariant 5), and none of the ingest folders that hold them.
    files: ['ingest/parse/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...deployablePatterns('ingest'),
            { group: ['uWebSockets.js', '@nats-io/*', 'nats', 'piscina'], message: 'ingest/parse/ is pure: no uWS, NATS or piscina.' },
            { group: ['**/http/**', '**/pool/**', '**/publish/**', '**/ingest-node.js', '**/token-registry.js'], message: 'ingest/parse/ imports only its own files, ../errors.js, ../message-size.js and lib/.' },
          ],
        },
      ],
    },
  },
  // Inside workers/ (docs/workers.md): the start-up wiring reaches each folder through its entry; a role
  // imports the coordination through its entry and never another role or the wiring; the
  // coordination imports no role.
  {
    files: ['workers/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [...deployablePatterns('workers'), { group: ['./*/**', '!./*/index.js'], message: 'Import a worker folder through its index.js.' }] },
      ],
    },
  },
  {
    files: ['workers/*/**/*.ts'],
    ignores: ['**/*.test.ts', 'workers/coordination/**', 'workers/migrations/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...deployablePatterns('workers'),
            { group: ['../*.js', '../[a-z]*/**', '!../coordination/index.js'], message: 'A role imports only the coordination, through coordination/index.js.' },
          ],
        },
      ],
    },
  },
  {
    // Files in a role's own sub-folders (exports/destinations/…) may import the rest of their role.
    files: ['workers/*/*/**/*.ts'],
    ignores: ['**/*.test.ts', 'workers/coordination/**', 'workers/migrations/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...deployablePatterns('workers'),
            { group: ['../../*.js', '../../[a-z]*/**', '!../../coordination/index.js'], message: 'A role imports only the coordination, through coordination/index.js.' },
          ],
        },
      ],
    },
  },
  {
    files: ['workers/coordination/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [...deployablePatterns('workers'), { group: ['../*.js', '../[a-z]*/**'], message: 'The coordination imports no role and not the start-up wiring.' }] },
      ],
    },
  },
  {
    // The launcher runs the deployables as processes (and admin through its CLI); it shares only lib/.
    files: ['deploy/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/ingest/**', '**/admin/**', '**/workers/**', '**/bench/**', '**/cli/**', '**/test/**'], message: 'deploy/ runs the deployables; it imports only lib/.' }] },
      ],
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
    },
  },
);
