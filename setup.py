"""Builds glnet._glnet with the project's CMake build (pyproject.toml has the rest and says how to install).

GLNET_BUILD_DIR names a build directory to use (an already configured one, such as build/, builds only the
module); by default build/python-<interpreter> is configured for the running interpreter."""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        build = os.environ.get("GLNET_BUILD_DIR") or os.path.join(ROOT, "build", "python-" + sys.implementation.cache_tag)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPython3_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", build, "--target", "_glnet", "--parallel", str(os.cpu_count() or 1)], check=True)
        built = os.path.join(build, "python", "glnet", "_glnet" + suffix)
        if not os.path.exists(built):
            sys.exit(f"setup.py: {build} built no _glnet{suffix} for this Python ({sys.executable}); "
                     "its CMake cache names another interpreter: leave GLNET_BUILD_DIR unset")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("glnet._glnet", sources=[])], cmdclass={"build_ext": CMakeBuild})
