/* The gzip decoder of ISA-L (igzip), behind four calls whose arguments are
 * plain integers and pointers: the Rust side never sees `struct
 * inflate_state`, whose layout is the installed header's business. */
#include <stdint.h>
#include <stdlib.h>
#include <isa-l/igzip_lib.h>

struct inflate_state *telemeter_gunzip_new(void) {
    struct inflate_state *state = malloc(sizeof *state);
    if (state != NULL) {
        isal_inflate_init(state);
        state->crc_flag = ISAL_GZIP;
    }
    return state;
}

void telemeter_gunzip_free(struct inflate_state *state) { free(state); }

/* Makes the state ready for the next gzip member of a stream. */
void telemeter_gunzip_next_member(struct inflate_state *state) {
    isal_inflate_reset(state);
    state->crc_flag = ISAL_GZIP;
}

/* Inflates from in[0..in_len] into out[0..out_len]: *consumed and *produced
 * are the bytes taken and written, *finished whether the member ended (its
 * checksum and size verified). Returns ISA-L's code: 0, or below 0 for a
 * damaged stream. */
int telemeter_gunzip(struct inflate_state *state, const uint8_t *in, uint32_t in_len, uint8_t *out, uint32_t out_len,
                     uint32_t *consumed, uint32_t *produced, int *finished) {
    state->next_in = (uint8_t *)in;
    state->avail_in = in_len;
    state->next_out = out;
    state->avail_out = out_len;
    int code = isal_inflate(state);
    *consumed = in_len - state->avail_in;
    *produced = out_len - state->avail_out;
    *finished = state->block_state == ISAL_BLOCK_FINISH;
    return code;
}
