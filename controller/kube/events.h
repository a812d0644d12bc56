/* Kubernetes Events (core/v1 Event POST) that cannot flood the API, with
 * client-go's meaning: each involved object has its own token bucket (burst
 * 25, then one per 5 minutes; the spam filter), so a noisy object is cut off
 * while a thousand new ones are each reported at once; an identical (object
 * uid, type, reason, message) seen again within a 10-minute window (or
 * later while that Event's write is still pending) is aggregated into the
 * existing Event (its count is PATCHed at most every 30 s, and once the 30 s
 * are over whether or not it occurs again) or skipped; a
 * global safety cap (500/s, burst 500) sits well above the controller's own
 * rate. Sending happens on eight background threads behind a bounded queue;
 * an event the spam filter refuses, or that finds the queue full or fails to
 * send, is dropped and counted. */
#ifndef SBX_KUBE_EVENTS_H
#define SBX_KUBE_EVENTS_H

#include <stddef.h>

#include "kube/client.h"

struct event_recorder;

/* Returns a new recorder writing as component (e.g. "sandbox-controller") and
 * starts its thread; the client is borrowed and must outlive the recorder.
 * Returns NULL if the thread cannot be started. */
struct event_recorder *event_recorder_new(struct kube_client *c, const char *component);
/* Records an Event about the object (apiVersion, kind, namespace, name, uid;
 * ns "" or NULL for cluster-scoped objects, whose Events go to "default").
 * type is "Normal" or "Warning"; reason CamelCase; the message is cut at 1024
 * bytes. Never blocks on the network. */
void event_record(struct event_recorder *r, const char *api_version, const char *kind,
		  const char *ns, const char *name, const char *uid, const char *type,
		  const char *reason, const char *message);
/* Events dropped so far (spam filter, queue full or send failed). */
size_t event_recorder_dropped(struct event_recorder *r);
/* Events written so far (creates and count patches that succeeded). */
size_t event_recorder_sent(struct event_recorder *r);
/* Flushes what it can within about 2 s (the queue, and the counts waiting for
 * their patch interval), then stops the thread and frees. */
void event_recorder_free(struct event_recorder *r);
/* For tests: sets every recorder's aggregation window in ms (default 10
 * minutes); ms <= 0 restores the default. The controller never calls it. */
void event_recorder_set_window_ms(int ms);
/* For tests: sets every recorder's least time between two writes of one
 * Event's count in ms (default 30 s); ms <= 0 restores the default. */
void event_recorder_set_patch_interval_ms(int ms);

#endif
