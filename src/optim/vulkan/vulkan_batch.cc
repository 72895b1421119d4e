// Buffers bound to new memory, and the message of a failed Vulkan call.
#include "optim/vulkan/vulkan_batch.h"

namespace luminav::vulkan {

int fail(VkResult r, const std::string& what, std::string* why) {
  *why = what + ": " + vk_result_name(r);
  return (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY) ? LUMINAV_STATUS_OUT_OF_MEMORY
                                                                                 : LUMINAV_STATUS_DRIVER_ERROR;
}

int create_buffer(Context& c, VkDeviceSize bytes, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                  VkBuffer* out, VkDeviceMemory* out_memory, void** mapped, std::string* why) {
  const Api& vk = c.api();
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (VkResult r = vk.vkCreateBuffer(c.device(), &info, nullptr, &buffer); r != VK_SUCCESS) {
    return fail(r, "vkCreateBuffer", why);
  }
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(c.device(), buffer, &req);
  int type = c.memory_type(req.memoryTypeBits, want | prefer);
  if (type < 0) type = c.memory_type(req.memoryTypeBits, want);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  int code = LUMINAV_STATUS_OK;
  if (type < 0) {
    *why = "no memory type with flags " + std::to_string(want) + " on " + c.device_name();
    code = LUMINAV_STATUS_DRIVER_ERROR;
  } else {
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = static_cast<uint32_t>(type);
    if (VkResult r = vk.vkAllocateMemory(c.device(), &alloc, nullptr, &memory); r != VK_SUCCESS) {
      memory = VK_NULL_HANDLE;
      code = fail(r, "vkAllocateMemory(" + std::to_string(req.size) + " bytes)", why);
    } else if (VkResult b = vk.vkBindBufferMemory(c.device(), buffer, memory, 0); b != VK_SUCCESS) {
      code = fail(b, "vkBindBufferMemory", why);
    } else if (mapped) {
      if (VkResult m = vk.vkMapMemory(c.device(), memory, 0, VK_WHOLE_SIZE, 0, mapped); m != VK_SUCCESS) {
        code = fail(m, "vkMapMemory", why);
      }
    }
  }
  if (code) {
    if (memory) vk.vkFreeMemory(c.device(), memory, nullptr);
    vk.vkDestroyBuffer(c.device(), buffer, nullptr);
    return code;
  }
  *out = buffer;
  *out_memory = memory;
  return LUMINAV_STATUS_OK;
}

}  // namespace luminav::vulkan
