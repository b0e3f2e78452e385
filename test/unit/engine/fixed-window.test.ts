import { MemoryFixedWindow } from '../../../limiters/fixed-window.js';
import { fixedWindowCases } from './fixed-window-cases.js';

fixedWindowCases('memory', (clock) => new MemoryFixedWindow(clock));
