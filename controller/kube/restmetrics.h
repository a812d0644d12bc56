/* client-go's rest_client metrics of the Kubernetes client, and the
 * product's count of its requests: rest_client_requests_total{code,method,
 * host}, rest_client_request_duration_seconds{verb,host} (not for watches)
 * and sandbox_kube_requests_total. */
#ifndef SBX_KUBE_RESTMETRICS_H
#define SBX_KUBE_RESTMETRICS_H

/* Registers the families; server (the API server's URL) gives the host
 * label. Once, before the client sends anything. */
void kube_rest_metrics_register(const char *server);
/* The client's observer (struct kube_client_opts.observe): counts one
 * answered (status) or failed (0) request that took seconds. */
void kube_rest_metrics_observe(void *ctx, const char *method, long status, double seconds, int stream);

#endif
