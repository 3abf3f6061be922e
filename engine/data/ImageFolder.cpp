#include "data/ImageFolder.h"

#include "data/Image.h"
#include "base/check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

namespace glnet {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t largestClasses = 256;  // labels are bytes
constexpr std::uint64_t largestDecodedBytes = (std::uint64_t{1} << 31) - 1;

bool isImageFile(const fs::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp" || extension == ".pgm";
}

// Sub-folder name → its image files, both sorted.
std::map<std::string, std::vector<fs::path>> classFolders(const fs::path& directory) {
  std::map<std::string, std::vector<fs::path>> classes;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.empty() || name[0] == '.') continue;
    std::vector<fs::path>& files = classes[name];
    for (const fs::directory_entry& file : fs::directory_iterator(entry.path())) {
      if (file.is_regular_file() && file.path().filename().string()[0] != '.' && isImageFile(file.path())) files.push_back(file.path());
    }
    if (files.empty()) throw Error(entry.path().string() + ": a class folder with no PNG, JPEG, BMP or PGM images");
    std::sort(files.begin(), files.end());
  }
  if (classes.empty()) throw Error(directory.string() + ": no class folders (an image folder holds one sub-folder of images per class)");
  if (classes.size() > largestClasses) throw Error(directory.string() + ": " + std::to_string(classes.size()) + " classes; glnet trains at most 256");
  return classes;
}

void append(LabelledImages& set, const fs::path& file, std::uint8_t label, std::uint32_t channels, std::uint32_t size) {
  std::vector<std::uint8_t> planes;
  if (channels == 1) {
    const GrayImage image = loadGrayImage(file.string());
    planes = resizeToPlanes(image.pixels.data(), image.width, image.height, 1, size);
  } else {
    const RgbImage image = loadRgbImage(file.string());
    planes = resizeToPlanes(image.pixels.data(), image.width, image.height, 3, size);
  }
  if (set.images.pixels.size() + planes.size() > largestDecodedBytes) {
    throw Error(file.string() + ": the decoded images pass 2 GiB, more than glnet keeps of a data set on the GPU (one storage block); "
                "use a smaller " + optionName("size") + " or fewer images");
  }
  set.images.pixels.insert(set.images.pixels.end(), planes.begin(), planes.end());
  set.labels.push_back(label);
  ++set.images.count;
}

LabelledImages emptySet(std::uint32_t channels, std::uint32_t size) {
  LabelledImages set;
  set.images.channels = channels;
  set.images.rows = size;
  set.images.columns = size;
  return set;
}

}  // namespace

std::vector<std::uint8_t> resizeToPlanes(const std::uint8_t* interleaved, int width, int height, int channels, std::uint32_t size) {
  GLNET_ASSERT(width > 0 && height > 0 && channels > 0 && size > 0, "an image and a size to resize it to");
  std::vector<std::uint8_t> planes(static_cast<std::size_t>(channels) * size * size);
  const double scaleX = static_cast<double>(width) / size, scaleY = static_cast<double>(height) / size;
  for (std::uint32_t y = 0; y < size; ++y) {
    const double sy = std::clamp((y + 0.5) * scaleY - 0.5, 0.0, static_cast<double>(height - 1));
    const int y0 = static_cast<int>(sy), y1 = std::min(y0 + 1, height - 1);
    const double fy = sy - y0;
    for (std::uint32_t x = 0; x < size; ++x) {
      const double sx = std::clamp((x + 0.5) * scaleX - 0.5, 0.0, static_cast<double>(width - 1));
      const int x0 = static_cast<int>(sx), x1 = std::min(x0 + 1, width - 1);
      const double fx = sx - x0;
      for (int c = 0; c < channels; ++c) {
        const auto at = [&](int px, int py) { return static_cast<double>(interleaved[(static_cast<std::size_t>(py) * width + px) * channels + c]); };
        const double value = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x1, y0)) + fy * ((1 - fx) * at(x0, y1) + fx * at(x1, y1));
        planes[(static_cast<std::size_t>(c) * size + y) * size + x] = static_cast<std::uint8_t>(std::lround(std::clamp(value, 0.0, 255.0)));
      }
    }
  }
  return planes;
}

ImageFolderData readImageFolders(const std::string& directory, std::uint32_t channels, std::uint32_t size, double testFraction,
                                 std::uint32_t seed) {
  GLNET_ASSERT(channels == 1 || channels == 3, "gray or RGB images");
  ImageFolderData data{emptySet(channels, size), emptySet(channels, size), {}};
  const fs::path root(directory);
  if (!fs::is_directory(root)) {
    if (!fs::exists(root)) throw FileNotFound(directory + ": no such directory");
    throw Error(directory + ": not a directory (an image folder holds one sub-folder of images per class, or train/ and test/ of them)");
  }
  if (fs::is_directory(root / "train")) {
    const auto train = classFolders(root / "train");
    if (!fs::is_directory(root / "test")) throw Error(directory + ": has train/ but no test/ (give both, or class folders and " + optionName("val-fraction") + ")");
    const auto test = classFolders(root / "test");
    std::uint8_t label = 0;
    for (const auto& [name, files] : train) {
      data.classes.push_back(name);
      for (const fs::path& file : files) append(data.train, file, label, channels, size);
      const auto tested = test.find(name);
      if (tested != test.end()) {
        for (const fs::path& file : tested->second) append(data.test, file, label, channels, size);
      }
      ++label;
    }
    for (const auto& [name, files] : test) {
      if (!train.count(name)) throw Error((root / "test" / name).string() + ": a test class with no train/" + name + " folder");
    }
    return data;
  }
  if (!(testFraction > 0 && testFraction < 1)) {
    throw Error(directory + ": has no train/ and test/ folders; give " + optionName("val-fraction") + " to hold out part of each class for testing");
  }
  std::mt19937 random(seed * 2246822519u + 7u);
  std::uint8_t label = 0;
  for (auto& [name, files] : classFolders(root)) {
    data.classes.push_back(name);
    // Fisher-Yates with plain modulo draws, so that every library splits alike.
    for (std::size_t i = files.size(); i > 1; --i) std::swap(files[i - 1], files[random() % i]);
    const auto held = static_cast<std::size_t>(std::llround(testFraction * static_cast<double>(files.size())));
    for (std::size_t i = 0; i < files.size(); ++i) append(i < held ? data.test : data.train, files[i], label, channels, size);
    ++label;
  }
  if (data.train.images.count == 0 || data.test.images.count == 0) {
    throw Error(directory + ": " + optionSetting("val-fraction", std::to_string(testFraction)) + " leaves no " + (data.train.images.count ? "test" : "training") + " images");
  }
  return data;
}

}  // namespace glnet
