/* What a live pod found under a claim name means for a Sandbox: adopted
 * when it verifies and is certified, the next generation when its key
 * expired, a key conflict or a foreign pod otherwise. */
#ifndef SBX_RECONCILE_EXAMINE_H
#define SBX_RECONCILE_EXAMINE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "reconcile/view.h"

struct sbx_controller;

/* 1 when the live pod is certified for v: the whole pod, not only its sealed
 * identity (sbx_pod_payload_verify); else 0 with the reason in why. */
int sbx_rc_payload_matches(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			   size_t whylen);
/* The claim name of a scope pod: its sandbox.dev/claim, else its name
 * (borrowed from pod). */
const char *sbx_rc_claim_of(const cJSON *pod);
/* Decides what a live pod found under a claim name means for v (adopts it
 * when it verifies); *delay gets a requeue delay. */
enum sbx_examine sbx_rc_examine(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, int *delay);
/* 1 when uid is among pod's owner references (*is_controller, NULL ok: the
 * controller one). */
int sbx_rc_owned_by(const cJSON *pod, const char *uid, int *is_controller);
/* Whether the key had expired when v was made: 1 when pod's claim is at
 * least a key lifetime older than v, 0 when it was alive, -1 when its
 * claimed-at cannot be read. */
int sbx_rc_key_expired(const struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod);

#endif
