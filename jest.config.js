/** Tests are compiled by tsc into dist/ and run as native ESM (no transform). */
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/dist/test'],
  testMatch: ['**/*.test.js'],
  transform: {},
  globalSetup: '<rootDir>/dist/test/harness/global-setup.js',
  globalTeardown: '<rootDir>/dist/test/harness/global-teardown.js',
  testTimeout: 30000,
  maxWorkers: 2,
};
