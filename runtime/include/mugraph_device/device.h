/// \file device.h
/// The mugraph device library: everything a generated kernel includes.
#pragma once

#include "mugraph_device/blas.h"
#include "mugraph_device/copy_async.h"
#include "mugraph_device/dims.h"
#include "mugraph_device/elementwise.h"
#include "mugraph_device/mma.h"
#include "mugraph_device/platform.h"
#include "mugraph_device/tile.h"
#include "mugraph_device/tma.h"
#include "mugraph_device/wgmma.h"
#include "mugraph_device/wgmma_chain.h"
#include "mugraph_device/wgmma_deferred.h"
