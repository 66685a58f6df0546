// Skips a CUDA test, visibly, on a machine without a usable GPU.
#pragma once

#include <gtest/gtest.h>

#include "backend/devices.h"

#define ZINC_REQUIRE_GPU()                                                              \
    do {                                                                                \
        static const auto zinc_report_ = zinc::backend::query_cuda();                   \
        bool zinc_any_ = false;                                                         \
        for (const auto& g : zinc_report_.gpus) zinc_any_ = zinc_any_ || g.usable;      \
        if (!zinc_any_) GTEST_SKIP() << "no usable GPU: " << zinc_report_.error;        \
    } while (0)
