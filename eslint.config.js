import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'helm/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Product code takes Node's built-ins from process.getBuiltinModule(), not `import`: an ES import of a
    // built-in builds its namespace by running every lazy getter (node:http's loads Node's bundled fetch
    // and WebSocket, node:crypto's webcrypto), memory every gw process would carry (docs/benchmarks.md, "Memory under load").
    files: [
      'cli/**/*.ts',
      'lib/**/*.ts',
      'contract/**/*.ts',
      'stores/**/*.ts',
      'compiler/**/*.ts',
      'limiters/**/*.ts',
      'controller/**/*.ts',
      'facade/**/*.ts',
      'webhook/**/*.ts',
      'standalone/**/*.ts',
      'sidecar/**/*.ts',
      'streams/**/*.ts',
    ],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^node:',
              allowTypeImports: true,
              message: "use process.getBuiltinModule('node:…') for values (types may be imported)",
            },
          ],
        },
      ],
    },
  },
);
