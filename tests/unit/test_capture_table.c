/*
 * test_capture_table.c - shim/capture_table.c alone: how a thread's memo
 * of its last stream lookup holds captures. A call into a capture borrows
 * the memo's reference instead of taking one of its own; while it does,
 * the thread's other lookups and the end of the capture leave the memo
 * alone, so the record outlives the call; the memo gives its reference
 * back once the call is done. Each test runs in a process of its own, so
 * the table starts empty.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "shim/capture_table.h"

/* capture_table.c's only outside calls: no journal is ever written here. */
void journal_init(struct journal *j)
{
    memset(j, 0, sizeof *j);
}

void journal_free(struct journal *j)
{
    (void)j;
}

static int refs(const struct capture *cap)
{
    return __atomic_load_n(&cap->refs, __ATOMIC_RELAXED);
}

/* A registered capture on the stream `key`: the caller's and the table's
 * references. */
static struct capture *begun(const void *key)
{
    struct capture *cap = ctab_new();
    cr_assert_not_null(cap);
    cap->origin.key = key;
    cr_assert_eq(ctab_register(cap), 1);
    cr_assert_eq(refs(cap), 2);
    return cap;
}

/* One call into the capture on `key`, which must find `cap`; returns
 * whether the call borrowed the memo's reference. */
static int one_call(const void *key, struct capture *cap)
{
    int borrowed = -1;
    struct capture *found = ctab_find_stream_for_call(key, &borrowed);
    cr_assert_eq(found, cap);
    ctab_call_done(found, borrowed);
    return borrowed;
}

Test(capture_table, a_call_borrows_the_memo_instead_of_taking_a_reference)
{
    static char stream;
    struct capture *cap = begun(&stream);
    cr_assert_eq(one_call(&stream, cap), 0, "the first lookup fills the memo");
    cr_assert_eq(refs(cap), 3, "caller, table and memo");
    int borrowed = 0;
    struct capture *found = ctab_find_stream_for_call(&stream, &borrowed);
    cr_assert_eq(found, cap);
    cr_assert_eq(borrowed, 1);
    cr_assert_eq(refs(cap), 3, "a borrowing call takes no reference");
    ctab_call_done(found, borrowed);
    cr_assert_eq(refs(cap), 3, "nor gives one back");
}

Test(capture_table, a_lookup_inside_a_borrowing_call_leaves_the_memo_alone)
{
    static char stream_a, stream_b;
    struct capture *a = begun(&stream_a), *b = begun(&stream_b);
    one_call(&stream_a, a);
    int borrowed = 0;
    cr_assert_eq(ctab_find_stream_for_call(&stream_a, &borrowed), a);
    cr_assert_eq(borrowed, 1);
    struct capture *inner = ctab_find_stream(&stream_b);
    cr_assert_eq(inner, b);
    cr_assert_eq(refs(b), 3, "the caller's reference only: the memo still holds a");
    cr_assert_eq(refs(a), 3, "a keeps the memo's reference");
    int inner_borrowed = -1;
    struct capture *nested = ctab_find_stream_for_call(&stream_a, &inner_borrowed);
    cr_assert_eq(nested, a);
    cr_assert_eq(inner_borrowed, 0, "the memo is lent once at a time");
    ctab_call_done(nested, inner_borrowed);
    ctab_release(inner);
    ctab_call_done(a, borrowed);
    cr_assert_eq(refs(a), 3);
    cr_assert_eq(refs(b), 2);
    cr_assert_eq(one_call(&stream_a, a), 1, "the memo still answers for a");
}

Test(capture_table, a_capture_ended_during_a_borrowing_call_outlives_the_call)
{
    static char stream, other;
    struct capture *cap = begun(&stream);
    one_call(&stream, cap);
    int borrowed = 0;
    cr_assert_eq(ctab_find_stream_for_call(&stream, &borrowed), cap);
    cr_assert_eq(borrowed, 1);
    /* The capture ends meanwhile (as another thread may end it): the
     * table's and its creator's references go, and the end asks this
     * thread's memo to let go of it. */
    ctab_unregister(cap);
    ctab_release(cap);
    ctab_memo_forget(cap);
    cr_assert_null(ctab_find_stream(&other), "no capture is left in the table");
    cr_assert_eq(refs(cap), 1, "the lent memo keeps the record for the call");
    ctab_call_done(cap, borrowed);
    cr_assert_eq(refs(cap), 1, "until the memo itself is given back");
    ctab_memo_forget(cap);
    cr_assert_eq(ctab_new(), cap, "the last reference gone, the record serves the next capture");
}

Test(capture_table, a_changed_table_is_looked_up_again)
{
    static char stream, other;
    struct capture *cap = begun(&stream);
    one_call(&stream, cap);
    cr_assert_eq(one_call(&stream, cap), 1);
    begun(&other);   /* a registration changes what the table may answer */
    cr_assert_eq(one_call(&stream, cap), 0, "the memo is not trusted across a change");
    cr_assert_eq(one_call(&stream, cap), 1);
    cr_assert_eq(refs(cap), 3);
}
