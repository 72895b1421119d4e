# Writes manifest.json for the AOT kernels (run at build time with cmake -P).
# In: OUT, DIR (where the artifacts are), ARTIFACTS ("arch|kind|file;..."),
#     KERNELS ("name;..."), SIGNATURE, BLOCK_SIZE, SHARED_MEM, TRAILING.
set(artifact_json "")
foreach(entry IN LISTS ARTIFACTS)
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 arch)
  list(GET parts 1 kind)
  list(GET parts 2 file)
  file(SHA256 "${DIR}/${file}" digest)
  file(SIZE "${DIR}/${file}" size)
  if(artifact_json)
    string(APPEND artifact_json ",\n")
  endif()
  string(APPEND artifact_json
    "    {\"arch\": \"${arch}\", \"kind\": \"${kind}\", \"file\": \"${file}\", \"size\": ${size}, \"sha256\": \"${digest}\"}")
endforeach()
set(kernel_json "")
foreach(name IN LISTS KERNELS)
  if(kernel_json)
    string(APPEND kernel_json ",\n")
  endif()
  string(APPEND kernel_json
    "    {\"name\": \"${name}\", \"signature\": \"${SIGNATURE}\", \"num_trailing_scratch_ptrs\": ${TRAILING}, \"block_size\": ${BLOCK_SIZE}, \"shared_mem_bytes\": ${SHARED_MEM}}")
endforeach()
file(WRITE "${OUT}.tmp"
"{\n  \"format\": \"luminav-kernels/1\",\n  \"platform\": \"cuda\",\n  \"artifacts\": [\n${artifact_json}\n  ],\n  \"kernels\": [\n${kernel_json}\n  ]\n}\n")
file(RENAME "${OUT}.tmp" "${OUT}")
