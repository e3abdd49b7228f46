/** Reading text files strictly: UTF-8 only, errors that name the file and the line. */
import { readFile } from 'node:fs/promises';

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The file's bytes as text: strict UTF-8 (invalid bytes are refused with the first bad line's number, never replaced,
 * since replacements would make different texts look alike), a leading byte-order mark dropped.
 */
export function decodeUtf8(bytes: Uint8Array, path: string): string {
  try {
    return STRICT_UTF8.decode(bytes); // drops a leading BOM (ignoreBOM is false)
  } catch {
    let line = 1;
    let start = 0;
    for (let i = 0; i <= bytes.length; i++) {
      if (i < bytes.length && bytes[i] !== 0x0a) continue;
      try {
        STRICT_UTF8.decode(bytes.subarray(start, i));
      } catch {
        throw new Error(`${path}:${line}: not valid UTF-8 text (save the file as UTF-8)`);
      }
      line++;
      start = i + 1;
    }
    throw new Error(`${path}: not valid UTF-8 text (save the file as UTF-8)`);
  }
}

/** Reads a UTF-8 text file (a leading BOM dropped, invalid bytes refused with the line); errors name the file. */
export async function readTextFile(path: string): Promise<string> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new Error(`cannot read ${path}: ${(e as Error).message}`);
  }
  return decodeUtf8(bytes, path);
}
