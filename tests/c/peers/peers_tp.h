// The LTTng-UST tracepoint tests/c/peers/peers.cc times: one event with one
// 64-bit integer field (the tuple id), as LogTS records one id and its TSC.
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER cp_peers

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "peers_tp.h"

#if !defined(CP_PEERS_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define CP_PEERS_TP_H

#include <stdint.h>
#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(cp_peers, event,
                           LTTNG_UST_TP_ARGS(int64_t, id),
                           LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int64_t, id, id)))

#endif

#include <lttng/tracepoint-event.h>
