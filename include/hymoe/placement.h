// The placement layer in one include: planner, activation statistics (files, recorder, summaries) and evaluation.
#pragma once

#include "hymoe/placement/planner.h"
#include "hymoe/placement/plan_file.h"
#include "hymoe/placement/stats.h"
#include "hymoe/placement/trace.h"
#include "hymoe/placement/evaluate.h"
#include "hymoe/placement/decode_policy.h"
#include "hymoe/placement/heatmap.h"
#include "hymoe/placement/replicas.h"
