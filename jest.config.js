/* global process */
/**
 * Tests are compiled by tsc into dist/ and run as native ESM (no transform). A `*.alone.test.js` file
 * measures latency and needs the machine to itself: `npm test` leaves it out, and `npm run test:alone`
 * (GW_TEST_ALONE=1) runs those files only, one at a time, after the others (docs/testing.md).
 */
const alone = process.env.GW_TEST_ALONE === '1';
export default {
  testEnvironment: 'node',
  roots: ['<rootDir>/dist/test'],
  testMatch: alone ? ['**/*.alone.test.js'] : ['**/*.test.js'],
  testPathIgnorePatterns: alone ? ['/node_modules/'] : ['/node_modules/', '\\.alone\\.test\\.js$'],
  transform: {},
  globalSetup: '<rootDir>/dist/test/harness/global-setup.js',
  globalTeardown: '<rootDir>/dist/test/harness/global-teardown.js',
  testTimeout: 30000,
  maxWorkers: alone ? 1 : 2,
};
