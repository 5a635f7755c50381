// The placement layer in one include: planner, activation statistics (files, recorder, summaries) and evaluation.
#pragma once

#include "hymoe/placement/planner.h"
#include "hymoe/placement/plan_file.h"
