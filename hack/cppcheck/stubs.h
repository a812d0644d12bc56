/* Force-included by hack/lint.sh when cppcheck reads controller/: uthash's
 * iteration loop, which cppcheck cannot follow without uthash.h (reading it
 * takes minutes and reports its iterator as uninitialized). */
#define HASH_ITER(hh, head, el, tmp)                                                                        \
	for ((el) = (head), (tmp) = (el) ? (el)->hh.next : 0; (el); (el) = (tmp), (tmp) = (el) ? (el)->hh.next : 0)
/* utlist's doubly-linked list walk and sys/queue.h's tail-queue walk, for the
 * same reason (the fair work queue's tenants and flows; libevent's headers). */
#define DL_FOREACH(head, el) for ((el) = (head); (el); (el) = (el)->next)
#define TAILQ_FOREACH(var, head, field) for ((var) = ((head)->tqh_first); (var); (var) = ((var)->field.tqe_next))
