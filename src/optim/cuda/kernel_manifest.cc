// Parses and checks manifest.json; reads artifacts from a directory.
#include "optim/cuda/kernel_manifest.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "optim/cuda/sha256.h"

namespace luminav::cuda {

int ArtifactEntry::compute_capability() const {
  std::string_view digits;
  if (arch.rfind("sm_", 0) == 0) digits = std::string_view(arch).substr(3);
  else if (arch.rfind("compute_", 0) == 0) digits = std::string_view(arch).substr(8);
  else return -1;
  if (digits.size() < 2 || digits.size() > 4) return -1;
  int value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

const KernelEntry* KernelManifest::find_kernel(std::string_view name) const {
  for (const KernelEntry& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

namespace {

using simdjson::dom::element;
using simdjson::dom::object;

bool field_string(object o, const char* key, const std::string& where, std::string* out,
                  std::string* why) {
  std::string_view v;
  if (o[key].get_string().get(v) != simdjson::SUCCESS) {
    *why = "manifest: " + where + ": missing or non-string field \"" + key + "\"";
    return false;
  }
  out->assign(v);
  return true;
}

bool field_uint(object o, const char* key, const std::string& where, uint64_t* out, std::string* why) {
  if (o[key].get_uint64().get(*out) != simdjson::SUCCESS) {
    *why = "manifest: " + where + ": missing or non-integer field \"" + key + "\"";
    return false;
  }
  return true;
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool parse_kind(const std::string& s, ArtifactKind* kind) {
  if (s == "cubin") *kind = ArtifactKind::kCubin;
  else if (s == "ptx") *kind = ArtifactKind::kPtx;
  else if (s == "hsaco") *kind = ArtifactKind::kHsaco;
  else return false;
  return true;
}

}  // namespace

bool parse_kernel_manifest(std::string_view json, KernelManifest* out, std::string* why) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size(), true).get(doc); err != simdjson::SUCCESS) {
    *why = std::string("manifest: not valid JSON: ") + simdjson::error_message(err);
    return false;
  }
  object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) {
    *why = "manifest: the top level is not an object";
    return false;
  }
  KernelManifest m;
  if (!field_string(root, "platform", "top level", &m.platform, why)) return false;
  if (std::string_view version; root["triton_version"].get_string().get(version) == simdjson::SUCCESS) {
    m.triton_version.assign(version);
  }
  if (m.platform != "cuda" && m.platform != "rocm") {
    *why = "manifest: unknown platform \"" + m.platform + "\"";
    return false;
  }
  simdjson::dom::array artifacts, kernels;
  if (root["artifacts"].get_array().get(artifacts) != simdjson::SUCCESS) {
    *why = "manifest: missing array \"artifacts\"";
    return false;
  }
  if (root["kernels"].get_array().get(kernels) != simdjson::SUCCESS) {
    *why = "manifest: missing array \"kernels\"";
    return false;
  }
  size_t i = 0;
  for (element e : artifacts) {
    const std::string where = "artifacts[" + std::to_string(i++) + "]";
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) {
      *why = "manifest: " + where + " is not an object";
      return false;
    }
    ArtifactEntry a;
    std::string kind;
    if (!field_string(o, "arch", where, &a.arch, why) || !field_string(o, "kind", where, &kind, why) ||
        !field_string(o, "file", where, &a.file, why) || !field_uint(o, "size", where, &a.size, why) ||
        !field_string(o, "sha256", where, &a.sha256, why)) {
      return false;
    }
    if (std::string_view v; o["kernel"].get_string().get(v) == simdjson::SUCCESS) a.kernel.assign(v);
    if (std::string_view v; o["symbol"].get_string().get(v) == simdjson::SUCCESS) a.symbol.assign(v);
    if (!parse_kind(kind, &a.kind)) {
      *why = "manifest: " + where + ": unknown kind \"" + kind + "\"";
      return false;
    }
    if (!is_sha256_hex(a.sha256)) {
      *why = "manifest: " + where + ": sha256 is not 64 lowercase hex digits";
      return false;
    }
    if (a.file.empty() || a.file.find('/') != std::string::npos || a.file.find("..") != std::string::npos) {
      *why = "manifest: " + where + ": file must be a plain name in the manifest's directory";
      return false;
    }
    if (a.kind != ArtifactKind::kHsaco && a.compute_capability() < 0) {
      *why = "manifest: " + where + ": arch \"" + a.arch + "\" is not sm_XY or compute_XY";
      return false;
    }
    m.artifacts.push_back(std::move(a));
  }
  i = 0;
  for (element e : kernels) {
    const std::string where = "kernels[" + std::to_string(i++) + "]";
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) {
      *why = "manifest: " + where + " is not an object";
      return false;
    }
    KernelEntry k;
    uint64_t trailing = 0, block = 0, shared = 0;
    if (!field_string(o, "name", where, &k.name, why) ||
        !field_string(o, "signature", where, &k.signature, why) ||
        !field_uint(o, "num_trailing_scratch_ptrs", where, &trailing, why) ||
        !field_uint(o, "block_size", where, &block, why) ||
        !field_uint(o, "shared_mem_bytes", where, &shared, why)) {
      return false;
    }
    if (trailing > 2) {
      *why = "manifest: " + where + ": num_trailing_scratch_ptrs must be 0, 1 or 2, not " +
             std::to_string(trailing);
      return false;
    }
    if (block == 0 || block > 1024 || shared > (1u << 20)) {
      *why = "manifest: " + where + ": block_size must be 1..1024 and shared_mem_bytes sane";
      return false;
    }
    k.num_trailing_scratch_ptrs = static_cast<int>(trailing);
    k.block_size = static_cast<int>(block);
    k.shared_mem_bytes = static_cast<int>(shared);
    if (element per; o["elements_per_program"].get(per) == simdjson::SUCCESS &&
        per.get_uint64().get(k.elements_per_program) != simdjson::SUCCESS) {
      *why = "manifest: " + where + ": elements_per_program is not a non-negative integer";
      return false;
    }
    m.kernels.push_back(std::move(k));
  }
  *out = std::move(m);
  return true;
}

namespace {

std::vector<const ArtifactEntry*> candidates_of(const KernelManifest& manifest, const std::string_view* kernel,
                                                int cc) {
  const ArtifactEntry* best_cubin = nullptr;
  const ArtifactEntry* best_ptx = nullptr;
  for (const ArtifactEntry& a : manifest.artifacts) {
    if (kernel != nullptr && a.kernel != *kernel) continue;
    const int acc = a.compute_capability();
    if (acc < 0 || acc > cc) continue;
    if (a.kind == ArtifactKind::kCubin && acc / 10 == cc / 10) {
      if (best_cubin == nullptr || acc > best_cubin->compute_capability()) best_cubin = &a;
    } else if (a.kind == ArtifactKind::kPtx) {
      if (best_ptx == nullptr || acc > best_ptx->compute_capability()) best_ptx = &a;
    }
  }
  std::vector<const ArtifactEntry*> out;
  if (best_cubin != nullptr) out.push_back(best_cubin);
  if (best_ptx != nullptr) out.push_back(best_ptx);
  return out;
}

}  // namespace

std::vector<const ArtifactEntry*> artifact_candidates(const KernelManifest& manifest, int cc) {
  return candidates_of(manifest, nullptr, cc);
}

std::vector<const ArtifactEntry*> kernel_artifact_candidates(const KernelManifest& manifest,
                                                             std::string_view kernel, int cc) {
  return candidates_of(manifest, &kernel, cc);
}

int triton_trailing_scratch_ptrs(std::string_view version) {
  int major = 0, minor = 0;
  size_t i = 0;
  auto number = [&](int* out) {
    const size_t start = i;
    while (i < version.size() && version[i] >= '0' && version[i] <= '9' && i - start < 4) {
      *out = *out * 10 + (version[i++] - '0');
    }
    return i > start;
  };
  if (!number(&major) || i >= version.size() || version[i++] != '.' || !number(&minor)) return -1;
  if (major < 3 || (major == 3 && minor <= 2)) return 0;
  if (major == 3 && minor <= 4) return 1;
  return 2;
}

bool check_triton_manifest(const KernelManifest& manifest, std::string* why) {
  const int expected = triton_trailing_scratch_ptrs(manifest.triton_version);
  if (expected < 0) {
    *why = "manifest: triton_version \"" + manifest.triton_version + "\" is not MAJOR.MINOR[.PATCH]";
    return false;
  }
  for (const KernelEntry& k : manifest.kernels) {
    if (k.num_trailing_scratch_ptrs != expected) {
      *why = "manifest: kernel " + k.name + " declares " + std::to_string(k.num_trailing_scratch_ptrs) +
             " trailing scratch pointer(s), but kernels built by Triton " + manifest.triton_version + " take " +
             std::to_string(expected) + " (Note [trailing scratch pointers])";
      return false;
    }
    const bool has_file = std::any_of(manifest.artifacts.begin(), manifest.artifacts.end(),
                                      [&](const ArtifactEntry& a) { return a.kernel == k.name; });
    if (!has_file) {
      *why = "manifest: kernel " + k.name + " has no artifact";
      return false;
    }
  }
  return true;
}

bool verify_artifact(const ArtifactEntry& entry, std::span<const uint8_t> bytes, std::string* why) {
  if (bytes.size() != entry.size) {
    *why = entry.file + ": size " + std::to_string(bytes.size()) + " bytes, the manifest says " +
           std::to_string(entry.size) + " (truncated or replaced file)";
    return false;
  }
  const std::string digest = sha256_hex(bytes);
  if (digest != entry.sha256) {
    *why = entry.file + ": sha256 " + digest + " does not match the manifest's " + entry.sha256;
    return false;
  }
  return check_artifact(bytes, entry.kind, entry.file, why);
}

bool DirectoryArtifactStore::read(const std::string& file, std::vector<uint8_t>* bytes,
                                  std::string* why) const {
  const std::string path = directory_ + "/" + file;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    *why = "cannot open " + path;
    return false;
  }
  bytes->clear();
  uint8_t buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f.get())) > 0) bytes->insert(bytes->end(), buffer, buffer + n);
  if (std::ferror(f.get())) {
    *why = "error reading " + path;
    return false;
  }
  return true;
}

bool DirectoryArtifactStore::manifest_json(std::string* json, std::string* why) const {
  std::vector<uint8_t> bytes;
  if (!read("manifest.json", &bytes, why)) return false;
  json->assign(bytes.begin(), bytes.end());
  return true;
}

}  // namespace luminav::cuda
