/* The adoption check (contract section 5): whether a pod found under the
 * expected name or digest is a genuine claim of this scope. Every field is
 * read from the pod itself and compared; a list filter that selected the pod
 * proves nothing. */
#ifndef SBX_SANDBOX_VERIFY_H
#define SBX_SANDBOX_VERIFY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"

enum sbx_verify {
	SBX_VERIFY_OK = 0,
	SBX_VERIFY_NOT_MANAGED,		 /* managed-by / name labels missing or wrong */
	SBX_VERIFY_DIGEST_MISMATCH,	 /* sandbox.dev/scope-digest label != expected */
	SBX_VERIFY_OWNER_MISMATCH,	 /* owner annotation absent/present/value differs */
	SBX_VERIFY_FINGERPRINT_MISMATCH, /* genuine pod of the scope, other spec */
	SBX_VERIFY_NAMESPACE_MISMATCH,
	SBX_VERIFY_TERMINATING,	     /* metadata.deletionTimestamp set */
	SBX_VERIFY_BAD_SEAL,	     /* seal missing, malformed or not the controller's */
	SBX_VERIFY_MALFORMED,	     /* not an object; metadata, name, fingerprint or claimed-at missing */
	SBX_VERIFY_PAYLOAD_MISMATCH, /* sealed metadata, but containers/volumes not what we build */
};

struct sbx_verify_expect {
	const char *ns;
	const char *owner; /* NULL = none */
	const struct sbx_scope *scope;
	const struct sbx_seal_keys *keys; /* any of them may have made the seal */
	/* 1 normally; 0 to ask only "is this a genuine pod of this scope", so
	 * the caller can tell IdempotencyKeyConflict (a genuine pod with another
	 * fingerprint) from ForeignPodConflict. */
	int check_fingerprint;
};

/* Checks pod against e, in this order: malformed, namespace, not managed,
 * digest, owner, seal (recomputed over the pod's own namespace, name, digest
 * label, owner, fingerprint and claimed-at annotations), terminating,
 * fingerprint. The seal covers the fingerprint annotation, so
 * SBX_VERIFY_FINGERPRINT_MISMATCH means "genuine, but another spec". Returns
 * the first failing check or SBX_VERIFY_OK; a missing seal key never yields
 * OK. */
enum sbx_verify sbx_pod_verify(const cJSON *pod, const struct sbx_verify_expect *e);

/* 1 when pod (full or trimmed) is a sandbox pod this controller made for
 * Sandboxes that no Sandbox holds: not a warm pool's member (no
 * sandbox.dev/pool label: those are their pool's), none of its owner
 * references a Sandbox (its Sandbox deleted with --cascade=orphan, or the
 * references removed), not being deleted, and genuine under its own
 * namespace, scope digest label and owner (sbx_pod_verify with keys: the
 * labels and the seal). Nothing would ever delete it but the controller. A
 * reference to a Sandbox that is gone still counts: the garbage collector
 * takes that pod. */
int sbx_pod_orphaned(const cJSON *pod, const struct sbx_seal_keys *keys);

/* ---- The payload certificate: what makes a pod adoptable (contract 4) ----
 *
 * The seal covers the pod's identity, not its payload: whoever may delete and
 * create pods can replay a genuine seal onto another pod. So before a pod is
 * adopted, the WHOLE pod is certified against the pod this controller would
 * build for the Sandbox today ("expected", from sbx_pod_build with the live
 * pod's claimed-at and seal). It is an allow-list: every member of pod.spec,
 * of each container and of the security contexts must be one named below,
 * and anything else - a field this controller never writes, a field newer
 * Kubernetes adds - means "not adopted".
 *
 * Must match the Sandbox (the payload):
 *   - exactly one container "sandbox": image (or, with
 *     adoption.allowedMutations.imageDigestPinning, the same image or its
 *     repository + "@sha256:<64 hex>"), command, args, env (name/value only,
 *     in order; no envFrom), resources (quantities compared by value; a
 *     request the apiserver copied from a limit is accepted; a limit or
 *     request of a resource the Sandbox sets in neither way, at any
 *     quantity, only when declared in
 *     adoption.allowedMutations.resourceDefaults: a LimitRange's defaults);
 *   - runtimeClassName: the one the Sandbox names (and it must be allowed);
 *     for a Sandbox that names none, today's default or any class still in
 *     the allow-list (a pod made under an older default); no class only when
 *     today has no default.
 * Must never be present (whatever the configuration was):
 *   - hostNetwork, hostPID, hostIPC, shareProcessNamespace (true), hostUsers
 *     true, a service account other than "default", automountServiceAccount-
 *     Token other than false, enableServiceLinks other than false,
 *     restartPolicy other than Never, dnsPolicy other than ClusterFirst,
 *     dnsConfig, hostAliases, hostname/subdomain, affinity, topology spread,
 *     scheduling gates, readiness gates, resource claims, os,
 *     activeDeadlineSeconds, a scheduler other than default-scheduler;
 *   - a pod securityContext other than {runAsNonRoot: true, runAsUser >= 1,
 *     runAsGroup >= 1, fsGroup >= 1, seccompProfile RuntimeDefault} (any
 *     non-root ids are accepted: an older configuration's uid is not foreign;
 *     sysctls, SELinux options, supplemental groups are refused);
 *   - on the sandbox container: a securityContext that does not have
 *     allowPrivilegeEscalation false and capabilities.drop [ALL] with nothing
 *     added, or that is privileged, runs as uid 0, has a seccomp profile
 *     other than RuntimeDefault or an unmasked procMount; lifecycle hooks,
 *     probes, ports, workingDir, stdin/tty, envFrom, volumeDevices;
 *   - a volume mount of the sandbox container outside the owner's own
 *     workspace: only emptyDir volumes, or (owner, pvc mode) today's claim
 *     with subPath "<owner>/<one segment>", or (owner, hostPath mode) host
 *     path "<root>/<namespace>/<owner>/<one segment>" of type Directory or
 *     DirectoryOrCreate; no subPathExpr, no mount propagation. The mount
 *     TABLE (which subdirectory at which path) may differ from today's: that
 *     is configuration. The storage may not: a changed pvcName, hostPathRoot
 *     or mode names other storage, and pods on it are not adopted;
 *   - any other container, initContainer or volume, except those of an
 *     injection declared in adoption.allowedMutations.injectedContainers
 *     (matched by name, kind and image pattern; never privileged; mounting
 *     only the volumes its declaration names, of kinds emptyDir, configMap,
 *     secret, downwardAPI or projected); no ephemeral containers;
 *   - labels other than the controller's own, today's pod.labels and keys
 *     declared in adoption.allowedMutations.labels (labels select pods for
 *     network policies); sandbox.dev/ annotations other than the
 *     controller's, and legacy AppArmor/seccomp annotations other than
 *     runtime/default.
 * Accepted as they are (not isolation, or written by the cluster itself):
 *   - placement the operator configures: nodeSelector, tolerations,
 *     priorityClassName, imagePullSecrets (they decide where and with which
 *     pull credentials, never what the pod may do; an older configuration's
 *     values are not foreign);
 *   - what the apiserver, its admission plugins and the scheduler write:
 *     serviceAccountName/serviceAccount "default" (ServiceAccount plugin),
 *     dnsPolicy ClusterFirst, schedulerName default-scheduler,
 *     terminationGracePeriodSeconds (defaulting), priority and
 *     preemptionPolicy (Priority plugin), tolerations for not-ready/
 *     unreachable (DefaultTolerationSeconds), overhead (RuntimeClass plugin),
 *     nodeName (the scheduler's binding), and per container
 *     terminationMessagePath, terminationMessagePolicy, imagePullPolicy and
 *     resizePolicy (defaulting).
 * Known gap: nodeName can also be written by the pod's creator, so a forged
 * pod may choose its node. Admission (contract section 6) is what refuses
 * forged pods; this certificate is the second line. */
struct sbx_certify {
	const cJSON *expected;	      /* sbx_pod_build for the Sandbox (today's config) */
	const cJSON *spec;	      /* the Sandbox's spec (was a runtime class named?) */
	const struct sbx_config *cfg; /* today's config: storage, allowed mutations */
};

/* Certifies live as described above. Returns SBX_VERIFY_OK, or
 * SBX_VERIFY_PAYLOAD_MISMATCH with the first reason in why (size whylen), or
 * SBX_VERIFY_MALFORMED when an argument is missing. */
enum sbx_verify sbx_pod_payload_verify(const cJSON *live, const struct sbx_certify *c, char *why,
				       size_t whylen);

/* For a pod already bound: what can change on a live pod (contract section
 * 5, PodTampered) - the images of its containers, added containers,
 * ephemeral containers. Works on a full pod or on the cache's trimmed pod
 * (sbx_trim_pod keeps name and image of each container, and "truncated":
 * true when there were too many to keep). Returns SBX_VERIFY_OK or
 * SBX_VERIFY_PAYLOAD_MISMATCH with the reason in why. */
enum sbx_verify sbx_pod_tamper_check(const cJSON *pod, const struct sbx_certify *c, char *why,
				     size_t whylen);

/* Returns 1 iff live is want, or with digest_pinning, want or its
 * repository (want without its tag) followed by "@sha256:<64 hex>". */
int sbx_image_matches(const char *live, const char *want, int digest_pinning);

/* Returns a static human-readable description of v. */
const char *sbx_verify_str(enum sbx_verify v);

#endif
