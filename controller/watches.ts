/**
 * How a reconciler declares its work (as kuadrant-operator's reconcilers declare their watches): the work
 * item kind it takes, the resource kinds it watches, and for each watched kind how an informer event maps
 * to work items. The declarations are in reconcilers.ts; dispatch.ts routes every event to the watches of
 * its kind and every item to the reconciler of its kind.
 */
import type { ChangeType, KubeObject } from '../lib/kube/informer.js';
import type { Informers, OperatorContext, REFS } from './context.js';
import type { SecretIndex } from './secret-index.js';
import type { Priority } from './work-queue.js';
import type { ItemOf, WorkItem, WorkKind } from './work-items.js';

/** A kind the controller has an informer of. */
export type WatchedKind = keyof typeof REFS;

/** One informer event as every watch reads it (derived once per event by dispatch.ts). */
export interface WatchEvent {
  kind: WatchedKind;
  type: ChangeType;
  obj: KubeObject;
  old?: KubeObject;
  namespace: string;
  name: string;
  /** An add, a delete, or a new generation (a status-only update is none). */
  specChanged: boolean;
  /** specChanged, or the deletion timestamp or the annotations changed. */
  lifecycleChanged: boolean;
  /** An ApiDefinition event that changed its namespace's set of api_ids (api-index.ts). */
  apiIdsChanged: boolean;
}

/** Work a watch asks for: queued `live` unless it says `bulk` (behind every live item), or after `afterMs`. */
export interface Queued {
  item: WorkItem;
  priority?: Priority;
  afterMs?: number;
}

/** What a watch's mapping may read. */
export interface WatchContext {
  informers: Informers;
  secretIndex: SecretIndex;
}

export interface Watch {
  kind: WatchedKind;
  /** The work this event means to the reconciler; none when it changes nothing the reconciler reads. */
  map(e: WatchEvent, w: WatchContext): readonly Queued[];
}

export interface Reconciler<K extends WorkKind> {
  /** The work item kind it takes. */
  kind: K;
  watches: readonly Watch[];
  reconcile(ctx: OperatorContext, item: ItemOf<K>): Promise<void>;
  /** Work queued after each run that succeeded. */
  after?(item: ItemOf<K>): readonly WorkItem[];
}

/** One reconciler per work item kind. */
export type Reconcilers = { [K in WorkKind]: Reconciler<K> };
