#include "reconcile/ctlmetrics.h"

struct sbx_ctl_metrics sbx_m;
const char *const sbx_ctl_label[] = { "sandbox" };

static const double latency_buckets[] = { .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };
/* A key's wait per namespace bucket: what a tenant feels, 1 ms .. 10 min. */
static const double ns_wait_buckets[] = { .001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 600 };
/* client-go's workqueue buckets: 10 ns .. 10 s by decades. */
static const double wq_buckets[] = { 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, .01, .1, 1, 10 };

void sbx_ctl_metrics_register(void)
{
	sbx_m.reconciles = obs_counter("sandbox_reconciles_total", "Sandbox reconciles run.", NULL);
	sbx_m.errors = obs_counter("sandbox_reconcile_errors_total", "Reconciles that ended in an error and were retried.",
				   NULL);
	sbx_m.pods_created = obs_counter("sandbox_pods_created_total", "Pods created for Sandboxes.", NULL);
	sbx_m.pods_adopted = obs_counter("sandbox_pods_adopted_total", "Sandboxes bound to a pod an earlier Sandbox created.",
					 NULL);
	sbx_m.key_conflicts = obs_counter("sandbox_key_conflicts_total",
					  "Sandboxes rejected for reusing a key with another spec.", NULL);
	sbx_m.foreign_pods = obs_counter("sandbox_foreign_pods_total",
					 "Pods found under a claim name that failed verification.", NULL);
	sbx_m.status_writes = obs_counter("sandbox_status_writes_total", "Sandbox status updates written.", NULL);
	sbx_m.cr_total = obs_counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller.",
				     "controller,result");
	sbx_m.cr_errors = obs_counter("controller_runtime_reconcile_errors_total",
				      "Total number of reconciliation errors per controller.", "controller");
	sbx_m.cr_time = obs_histogram("controller_runtime_reconcile_time_seconds",
				      "Length of time per reconciliation per controller.", "controller", NULL, 0);
	sbx_m.wq_depth = obs_gauge("workqueue_depth", "Current depth of workqueue.", "name");
	sbx_m.wq_adds = obs_counter("workqueue_adds_total", "Total number of adds handled by workqueue.", "name");
	sbx_m.wq_retries = obs_counter("workqueue_retries_total", "Total number of retries handled by workqueue.", "name");
	sbx_m.wq_queued = obs_histogram("workqueue_queue_duration_seconds",
					"How long in seconds an item stays in workqueue before being requested.", "name",
					wq_buckets, sizeof wq_buckets / sizeof wq_buckets[0]);
	sbx_m.wq_worked = obs_histogram("workqueue_work_duration_seconds",
					"How long in seconds processing an item from workqueue takes.", "name", wq_buckets,
					sizeof wq_buckets / sizeof wq_buckets[0]);
	sbx_m.wq_ns_depth = obs_gauge("sandbox_workqueue_namespace_depth",
				      "Keys ready in the work queue for the namespaces of a bucket (bucket = FNV-1a 32 of the "
				      "namespace modulo 16; sandbox-controller --work-queue-bucket NS prints it).",
				      "bucket");
	sbx_m.wq_ns_queued = obs_histogram("sandbox_workqueue_namespace_queue_duration_seconds",
					   "Seconds a key of a namespace of the bucket waited in the work queue before "
					   "a worker took it.",
					   "bucket", ns_wait_buckets, sizeof ns_wait_buckets / sizeof ns_wait_buckets[0]);
	sbx_m.wq_namespaces = obs_gauge("sandbox_workqueue_active_namespaces",
					"Namespaces with a key ready in the work queue (each is served in turn).", NULL);
	sbx_m.wq_flows = obs_gauge("sandbox_workqueue_active_flows",
				   "Namespace and owner pairs with a key ready in the work queue (each served in turn "
				   "within its namespace).",
				   NULL);
	sbx_m.wq_fair = obs_gauge("sandbox_workqueue_fair",
				  "1 when the work queue serves namespaces and owners in turn, 0 when it is one FIFO "
				  "(--work-queue-order fifo).",
				  NULL);
	sbx_m.to_bound = obs_histogram("sandbox_creation_to_bound_seconds",
				       "Seconds from a Sandbox's creationTimestamp to this controller writing Bound=True.",
				       NULL, latency_buckets, sizeof latency_buckets / sizeof latency_buckets[0]);
	sbx_m.to_ready = obs_histogram("sandbox_creation_to_ready_seconds",
				       "Seconds from a Sandbox's creationTimestamp to this controller writing Ready=True.",
				       NULL, latency_buckets, sizeof latency_buckets / sizeof latency_buckets[0]);
	sbx_m.phases = obs_gauge("sandbox_sandboxes", "Sandboxes in the cache by status.phase (None: no status yet).",
				 "phase");
	sbx_m.expirations = obs_counter("sandbox_expirations_total", "Sandboxes marked Expired at their shutdownTime.", NULL);
	sbx_m.suspensions = obs_counter("sandbox_suspensions_total", "Sandboxes marked Suspended.", NULL);
	sbx_m.resumes = obs_counter("sandbox_resumes_total", "Suspended Sandboxes resumed.", NULL);
	sbx_m.warm_binds = obs_counter("sandbox_warm_binds_total",
				       "New Sandboxes of a warm pool's template and owner, by result: hit (bound to a warm "
				       "pod) or miss (a cold pod, no Ready warm pod).",
				       "result");
	sbx_m.warm_pods_created = obs_counter("sandbox_warm_pods_created_total", "Warm pods created for pools.", NULL);
	sbx_m.resume_seconds = obs_histogram("sandbox_resume_duration_seconds",
					     "Seconds from the controller seeing a resume to the Sandbox Ready again.", NULL,
					     latency_buckets, sizeof latency_buckets / sizeof latency_buckets[0]);
}
