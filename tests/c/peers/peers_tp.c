// The probe of peers_tp.h, in a C unit of its own (what LTTng-UST's own
// examples do); peers.cc defines the tracepoint.
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "peers_tp.h"
