/*
 * capture_holds.h - what a capture's replay still needs (prefix
 * capture_holds_, and the release hook capture_on_release).
 *
 * Owns: the destroys and frees the program makes, while some capture may
 * still be replayed into a driver capture (a recapture, or a capture recap
 * records itself, until its end), of a handle one of that capture's
 * replayable calls names: an event it records or waits for, device memory
 * or pinned host memory a copy or memset names. Such a release is held
 * back - the program sees the success the driver gives - and made for real
 * once the capture has ended (or, if another capture's replay names the
 * handle too, once that one has). A journal thus owns what it replays: a
 * switch never replays a call into a destroyed event or freed memory.
 *
 * Must never: hold a release no replayable call needs (it goes to the
 * driver at once), make a held release twice, or take another capture's
 * lock while holding one (releases held at an end are settled after the
 * capture's lock is let go).
 */
#ifndef RECAP_CAPTURE_HOLDS_H
#define RECAP_CAPTURE_HOLDS_H

#include "shim/state/capture_table.h"
#include "shim/base/driver_api.h"

/* The hook of release rows (driver_api.def role release:K, guard rows
 * marked +hold=K after their guard), reached while some capture keeps a
 * journal: holds the call in the capture whose replay names its handle,
 * or makes it. A second release of a handle already held gets the
 * driver's answer for a destroyed handle. */
CUresult capture_on_release(enum drv_id id, union drv_args *args);

/* The capture has ended (caller holds cap->lock): no call of it will be
 * replayed any more. Moves its held releases into *out (n of them,
 * malloc'd; NULL when none), for capture_holds_settle after the lock is
 * let go. */
size_t capture_holds_take(struct capture *cap, struct held_release **out);

/* Makes each taken release for real, or holds it in another capture whose
 * replay still names its handle; frees the array. */
void capture_holds_settle(struct held_release *taken, size_t n);

#endif
