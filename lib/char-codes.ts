/** The character codes the nesting scans test (lib/json-depth.ts, lib/yaml-depth.ts): ASCII, so a byte and a UTF-16 unit alike. */
export const TAB = 0x09;
export const NL = 0x0a;
export const SPACE = 0x20;
export const BANG = 0x21;
export const QUOTE = 0x22;
export const AMPERSAND = 0x26;
export const DASH = 0x2d;
export const COLON = 0x3a;
export const QUESTION = 0x3f;
export const OPEN_ARRAY = 0x5b;
export const BACKSLASH = 0x5c;
export const CLOSE_ARRAY = 0x5d;
export const OPEN_OBJECT = 0x7b;
export const CLOSE_OBJECT = 0x7d;
