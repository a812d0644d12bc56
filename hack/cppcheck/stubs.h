/* Force-included by hack/lint.sh when cppcheck reads controller/: uthash's
 * iteration loop, which cppcheck cannot follow without uthash.h (reading it
 * takes minutes and reports its iterator as uninitialized). */
#define HASH_ITER(hh, head, el, tmp)                                                                        \
	for ((el) = (head), (tmp) = (el) ? (el)->hh.next : 0; (el); (el) = (tmp), (tmp) = (el) ? (el)->hh.next : 0)
