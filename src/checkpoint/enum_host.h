/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The coordinator's side of the source framework (sl_connector.h): one
 * enumerator host per source that has an enumerator.  The host runs the
 * source's enumerator on its own thread, keeps the assignment tracker
 * (enum_tracker.c) and the event gateway, and is what the coordinator
 * (snapshot before the trigger, completion, reset) and the readers (split
 * requests, finished splits, events, their snapshots) talk to.  See
 * README.md, "Enumerators".
 */
#ifndef SL_CHECKPOINT_ENUM_HOST_H
#define SL_CHECKPOINT_ENUM_HOST_H

#include "core/core.h"
#include "runtime/runtime.h"
#include "sluice/sl_connector.h"

/* ------------------------------------------------------------------ */
/* Assignment tracker (enum_tracker.c).  Not thread-safe: the host
 * serializes calls under its lock. */

/* Epoch of an assignment not yet covered by an enumerator snapshot. */
#define SL_ENUM_UNCHECKPOINTED UINT64_MAX

typedef struct sl_enum_assignment_s {
  uint32_t subtask;
  uint64_t epoch; /* first checkpoint whose enumerator snapshot followed
                     the assignment; SL_ENUM_UNCHECKPOINTED until then */
  char *id;
  uint8_t *state;
  size_t state_len;
} sl_enum_assignment_t;

typedef struct sl_enum_tracker_s {
  sl_enum_assignment_t *a;
  uint32_t n, cap;
} sl_enum_tracker_t;

/** @brief Remember that split went to subtask.  SL_OK or SL_ENOMEM. */
int sl__enum_tracker_record(sl_enum_tracker_t *tr, uint32_t subtask,
                            const sl_split_t *split);
/** @brief The enumerator's snapshot for id was taken: the assignments made
 * since the previous snapshot belong to epoch id. */
void sl__enum_tracker_on_checkpoint(sl_enum_tracker_t *tr, uint64_t id);
/** @brief Checkpoint id completed: forget assignments of epochs <= id (a
 * reset never goes back past a completed checkpoint it restored). */
void sl__enum_tracker_on_complete(sl_enum_tracker_t *tr, uint64_t id);
/**
 * @brief Reader subtask was reset to checkpoint restored (0: to the
 * start): remove and return its assignments of epochs > restored, the
 * ones its restored state does not hold, oldest first.
 * @ownership the caller owns *out (free with sl__enum_tracker_free_list).
 * @return SL_OK or SL_ENOMEM (nothing removed then).
 */
int sl__enum_tracker_take_uncovered(sl_enum_tracker_t *tr, uint32_t subtask,
                                    uint64_t restored,
                                    sl_enum_assignment_t **out,
                                    uint32_t *out_n);
void sl__enum_tracker_free_list(sl_enum_assignment_t *a, uint32_t n);
void sl__enum_tracker_close(sl_enum_tracker_t *tr);

/* ------------------------------------------------------------------ */
/* The host (enum_host.c). */



/* Hands an event that passed the gateway to its reader (takes ev).  Called
 * with the host's lock held, in the order the enumerator sent them; it
 * must not call back into the host. */
typedef void (*sl_enum_deliver_fn)(void *user, sl_enum_event_t *ev);

/* Told once, with the host's lock held, that the enumerator failed (the
 * sticky status is set): it wakes the readers, which then see the status
 * and fail their tasks.  It must not call back into the host. */
typedef void (*sl_enum_fail_fn)(void *user);

typedef struct sl_enum_host_s sl_enum_host_t;

/**
 * @brief Create the enumerator of source uid (vt->create with init) and,
 * with has_thread, its thread, which then calls discover once.  Without a
 * thread (tests), messages wait until sl__enum_host_run_pending.
 * @return SL_OK or the code of create (the message in *out_err names uid).
 * @thread any (the planner).
 */
int sl__enum_host_create(const char *uid, const sl_enum_vt_t *vt,
                         void *src_ctx, const sl_enum_init_t *init,
                         bool has_thread, sl_enum_host_t **out,
                         sl_error_t **out_err);
/** @brief Stop the thread, close the enumerator, drop held events. */
void sl__enum_host_destroy(sl_enum_host_t *h);
/** @brief Where events go (NULL: they wait in the gateway).  Events held
 * for readers that are not attached wait too.  @thread any. */
void sl__enum_host_attach(sl_enum_host_t *h, sl_enum_deliver_fn deliver,
                          void *user);
/** @brief Who is told when the enumerator fails (NULL: nobody).  A host
 * that failed already tells it at once.  @thread any. */
void sl__enum_host_on_fail(sl_enum_host_t *h, sl_enum_fail_fn on_fail,
                           void *user);
/** @brief Queue a discovery now (besides the interval's). */
int sl__enum_host_discover(sl_enum_host_t *h);
/** @brief Without a thread: handle every queued message on the caller. */
int sl__enum_host_run_pending(sl_enum_host_t *h, sl_error_t **out_err);
/** @brief The first error of an enumerator callback (sticky), or SL_OK;
 * *out_err gets a copy of its message.  @thread any. */
int sl__enum_host_status(sl_enum_host_t *h, sl_error_t **out_err);

/* Coordinator calls (synchronous: they return once the enumerator thread
 * has handled them, after every message queued before). */

/**
 * @brief The enumerator's snapshot for checkpoint id, taken before the
 * sources are triggered: closes the gateway at id for every reader and
 * moves the tracker's open assignments to epoch id.
 * @return SL_OK, the enumerator's error, or SL_ENOMEM.
 */
int sl__enum_host_snapshot(sl_enum_host_t *h, uint64_t id, sl_bytes_t *out,
                           sl_error_t **out_err);
/**
 * @brief sl__enum_host_snapshot that gives up at deadline_ns (monotonic
 * clock; INT64_MAX: never) or at sl__enum_host_interrupt: then it fails
 * with SL_ECANCELED and a message naming the source and the checkpoint,
 * and the enumerator thread drops the request when it gets to it (or, if
 * it is inside the enumerator's snapshot already, lets it finish and
 * discards it).  The caller aborts checkpoint id, which reopens the
 * gateway.  @thread the coordinator's triggering thread.
 */
int sl__enum_host_snapshot_until(sl_enum_host_t *h, uint64_t id,
                                 int64_t deadline_ns, sl_bytes_t *out,
                                 sl_error_t **out_err);
/** @brief End the coordinator's waits on this host now (the attempt is
 * ending).  @thread any. */
void sl__enum_host_interrupt(sl_enum_host_t *h);
/** @brief Checkpoint id completed (asynchronous; handled in order). */
void sl__enum_host_checkpoint_complete(sl_enum_host_t *h, uint64_t id);
/** @brief The newest completed checkpoint the host knows (or the one it
 * was restored from): a reset to an older one cannot be judged by the
 * tracker, which forgot those epochs; the planner recreates the
 * enumerator from that checkpoint instead.  @thread any. */
uint64_t sl__enum_host_horizon(sl_enum_host_t *h);
uint32_t sl__enum_host_parallelism(const sl_enum_host_t *h);
/** @brief Checkpoint id will not complete: its gateway closure ends. */
void sl__enum_host_checkpoint_aborted(sl_enum_host_t *h, uint64_t id);
/**
 * @brief Reader subtask is reset to checkpoint restored (0: the start):
 * its assignments after it go back to the enumerator (add_splits_back),
 * events still held for it are dropped.
 */
int sl__enum_host_subtask_reset(sl_enum_host_t *h, uint32_t subtask,
                                uint64_t restored, sl_error_t **out_err);
/** @brief Splits of old readers at another parallelism (subtask
 * UINT32_MAX) go back to the enumerator.  Copied. */
int sl__enum_host_add_splits_back(sl_enum_host_t *h, const sl_split_t *s,
                                  uint32_t n, sl_error_t **out_err);
/* Reader calls (any thread; asynchronous, handled in order). */

/** @brief Reader subtask took its snapshot for id: the gateway releases
 * the events held for it up to id (in order, through deliver). */
void sl__enum_host_reader_snapshot(sl_enum_host_t *h, uint32_t subtask,
                                   uint64_t id);
int sl__enum_host_add_reader(sl_enum_host_t *h, uint32_t subtask);
int sl__enum_host_request_split(sl_enum_host_t *h, uint32_t subtask);
int sl__enum_host_split_finished(sl_enum_host_t *h, uint32_t subtask,
                                 const char *id);
int sl__enum_host_reader_event(sl_enum_host_t *h, uint32_t subtask,
                               const uint8_t *ev, size_t len);

#endif
