// Anchor translation unit of the data engine library (each stage adds its own).
namespace luminamoon::data {
const char* engine_name() { return "luminamoon-data"; }
}  // namespace luminamoon::data
