export { preflight, type PreflightResult } from './preflight.js';
