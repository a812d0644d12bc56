/* The controller's own metric families (sandbox_* and controller-runtime's
 * reconcile and workqueue families), registered once per process and shared
 * by the decision (reconcile.c) and the wiring (controller.c). */
#ifndef SBX_RECONCILE_CTLMETRICS_H
#define SBX_RECONCILE_CTLMETRICS_H

#include "obs/metrics.h"

struct sbx_ctl_metrics {
	struct obs_metric *reconciles, *errors, *pods_created, *pods_adopted, *key_conflicts, *foreign_pods,
	    *status_writes;
	struct obs_metric *cr_total, *cr_errors, *cr_time;
	struct obs_metric *wq_depth, *wq_adds, *wq_retries, *wq_queued, *wq_worked;
	struct obs_metric *wq_ns_depth, *wq_ns_queued, *wq_namespaces, *wq_flows, *wq_fair;
	struct obs_metric *to_bound, *to_ready, *phases;
	struct obs_metric *expirations, *suspensions, *resumes, *resume_seconds;
	struct obs_metric *warm_binds, *warm_pods_created;
};

/* The families; NULL members until sbx_ctl_metrics_register. */
extern struct sbx_ctl_metrics sbx_m;
/* The controller label value of the controller-runtime families. */
extern const char *const sbx_ctl_label[];

/* Registers every family (idempotent: the registry returns the same family
 * for the same name). */
void sbx_ctl_metrics_register(void);

#endif
