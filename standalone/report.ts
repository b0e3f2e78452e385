/**
 * Standalone's per-resource log lines (refusals, missing references, missing Secret keys, duplicate
 * keys), each naming the resource and its manifest file, logged once while they stay the same: a
 * directory change logs only what changed. In a cluster the operator writes these into status instead.
 */
import type { AnyResource } from '../crds/kinds.js';
import type { Logger } from '../lib/logger.js';
import type { CompileProblem } from '../compiler/compile-config.js';
import { resourceLabel, type ResourceSnapshot } from '../compiler/snapshot.js';
import type { Yielder } from '../lib/yielder.js';

export interface Note {
  fields: Record<string, string>;
  line: string;
}

/** Notes of one apply, by an id stable across applies (what the note is about). */
export type Notes = Map<string, Note>;

/** A line about r: `Kind ns/name (file) <text>`, with kind, namespace, resource (its name; `name` is the logger's component) and file as log fields. */
export function noteOn(s: ResourceSnapshot, r: AnyResource, text: string): Note {
  const file = s.files?.get(r);
  return {
    fields: { kind: r.kind, namespace: r.metadata.namespace, resource: r.metadata.name, ...(file ? { file } : {}) },
    line: `${resourceLabel(s, r)} ${text}`,
  };
}

/** A refused ApiDefinition, naming its file and, for a conflict, the other one's file. */
export function refusalNote(s: ResourceSnapshot, p: CompileProblem): Note {
  const { fields } = noteOn(s, p.resource, '');
  if (!p.conflictsWith) return { fields, line: `resource refused: ${resourceLabel(s, p.resource)}: ${p.message}` };
  const otherFile = s.files?.get(p.conflictsWith);
  return {
    fields: { ...fields, ...(otherFile ? { conflictsWithFile: otherFile } : {}) },
    line: `resource refused: ${resourceLabel(s, p.resource)} conflicts with ${resourceLabel(s, p.conflictsWith)} (same listen path or api_id); that one keeps serving`,
  };
}

/** Logs each note that is new or changed since the previous call. */
export class ChangedNotesLog {
  private last = new Map<string, string>();

  constructor(private readonly logger: Logger) {}

  /** In slices (`y`): a burst of thousands of refused files logs thousands of lines. */
  async log(notes: Notes, y?: Yielder): Promise<void> {
    const now = new Map<string, string>();
    let i = 0;
    for (const [id, { fields, line }] of notes) {
      if (y && (++i & 63) === 0) await y.maybe();
      now.set(id, line);
      if (this.last.get(id) !== line) this.logger.warn(fields, line);
    }
    this.last = now;
  }
}
