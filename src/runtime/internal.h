/*
 * runtime/internal.h — every header of the runtime at once, for code
 * written before they were split (runtime/machine.h, tensor.h, memory.h,
 * port.h, launch.h, trace.h, ranks.h). New code includes the ones it uses;
 * nothing in src/ includes this one.
 */
#ifndef KB_RUNTIME_INTERNAL_H
#define KB_RUNTIME_INTERNAL_H

#include "runtime/launch.h"
#include "runtime/machine.h"
#include "runtime/memory.h"
#include "runtime/port.h"
#include "runtime/ranks.h"
#include "runtime/tensor.h"
#include "runtime/trace.h"

#endif
