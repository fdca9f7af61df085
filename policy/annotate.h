/*
 * annotate.h - telling helgrind about synchronisation it cannot see.
 *
 * helgrind models neither C11 atomics nor acquire/release orderings: code
 * that hands data over through an atomic describes the hand-over with
 * these (from valgrind's headers when installed; no-ops otherwise, and
 * outside valgrind). Owns nothing; must never be used to hide a real race:
 * each use names the atomic that orders the accesses.
 */
#ifndef RECAP_ANNOTATE_H
#define RECAP_ANNOTATE_H

#if defined(__has_include)
#if __has_include(<valgrind/helgrind.h>)
#include <valgrind/helgrind.h>
#endif
#endif
#ifndef ANNOTATE_HAPPENS_BEFORE
#define ANNOTATE_HAPPENS_BEFORE(obj) ((void)(obj))
#define ANNOTATE_HAPPENS_AFTER(obj) ((void)(obj))
#endif
#ifndef VALGRIND_HG_DISABLE_CHECKING
#define VALGRIND_HG_DISABLE_CHECKING(addr, len) ((void)(addr), (void)(len))
#endif

#endif
