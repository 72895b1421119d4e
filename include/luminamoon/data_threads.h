// Thread count of the data engine's parallel stages (oneTBB arenas).
#pragma once

namespace luminamoon {

// 0 restores the default: LUMINAMOON_NUM_THREADS if set, else every core.
void set_data_num_threads(int num_threads);
int data_num_threads();

}  // namespace luminamoon
