/*
 * text.h - byte-level text checks shared by the parsers and the log writer
 * (module prefix text_).
 *
 * Owns: deciding what counts as valid UTF-8 and how a piece of untrusted
 * input is shown inside a diagnostic. Must never: allocate, read global
 * state, or assume its input is NUL-terminated.
 */
#ifndef RECAP_TEXT_H
#define RECAP_TEXT_H

#include <stddef.h>

/* Length (1..4) of the well-formed UTF-8 sequence that starts at s[0] and
 * fits in n bytes; 0 when s[0] starts none (stray continuation byte,
 * overlong form, surrogate, code point above U+10FFFF, sequence cut short)
 * or n is 0. */
size_t text_utf8_seq_len(const unsigned char *s, size_t n);

/* Offset of the first byte of s[0..n) that is NUL or not part of a
 * well-formed UTF-8 sequence; n when there is none. */
size_t text_first_bad_byte(const char *s, size_t n);

/* Writes s[0..n) to out as a double-quoted string for a message: control
 * bytes and DEL as \xNN, quotes and backslashes escaped, invalid UTF-8 as
 * \xNN, and at most `max_shown` input bytes (cut on a character boundary,
 * then "..." after the closing quote). Always NUL-terminates when
 * outlen > 0; returns the length written. */
size_t text_quote(const char *s, size_t n, size_t max_shown, char *out, size_t outlen);

/* Length of s[0..len) without a multi-byte character cut off at its end
 * (what a bounded snprintf may leave); earlier bytes are not examined. */
size_t text_trim_partial(const char *s, size_t len);

#endif
