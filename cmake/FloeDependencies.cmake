# Finds floe's third-party libraries and exposes each as one imported target.
#
# Arrow/Parquet C++ (>= 24, for Parquet bloom-filter writing): find_package first;
# when the system has none, the C++ libraries and headers shipped in the pyarrow
# wheel of the project's virtualenv (FLOE_PYTHON, default .venv/bin/python). The
# wheel's directory goes into the RPATH so `floe` runs with no environment.

set(FLOE_MIN_ARROW_MAJOR 24)

find_package(Arrow CONFIG QUIET)
find_package(Parquet CONFIG QUIET)

if(Arrow_FOUND AND Parquet_FOUND)
  set(FLOE_ARROW_SOURCE "system (${Arrow_DIR})")
  set(FLOE_ARROW_VERSION "${Arrow_VERSION}")
  if(TARGET Arrow::arrow_shared)
    set(_floe_arrow_target Arrow::arrow_shared)
    set(_floe_parquet_target Parquet::parquet_shared)
  else()
    set(_floe_arrow_target Arrow::arrow_static)
    set(_floe_parquet_target Parquet::parquet_static)
  endif()
  add_library(floe_arrow INTERFACE)
  target_link_libraries(floe_arrow INTERFACE ${_floe_arrow_target})
  add_library(floe_parquet INTERFACE)
  target_link_libraries(floe_parquet INTERFACE ${_floe_parquet_target} floe_arrow)
else()
  set(FLOE_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
      "Python whose pyarrow wheel provides Arrow/Parquet C++ when no system package exists")
  if(NOT EXISTS "${FLOE_PYTHON}")
    message(FATAL_ERROR
      "Arrow/Parquet C++ not found: no system package (find_package(Arrow/Parquet) "
      "failed) and no Python at ${FLOE_PYTHON} to take them from the pyarrow wheel.\n"
      "Fix: run scripts/bootstrap (or `make build`), or pass "
      "-DFLOE_PYTHON=/path/to/python-with-pyarrow, or -DArrow_DIR=... for a system build.")
  endif()
  execute_process(
    COMMAND "${FLOE_PYTHON}" -c
      "import pyarrow as pa; pa.create_library_symlinks(); print(pa.__version__); print(pa.get_include()); print(pa.get_library_dirs()[0])"
    OUTPUT_VARIABLE _floe_pa_out
    ERROR_VARIABLE _floe_pa_err
    RESULT_VARIABLE _floe_pa_rc
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _floe_pa_rc EQUAL 0)
    message(FATAL_ERROR
      "Arrow/Parquet C++ not found, and ${FLOE_PYTHON} cannot import pyarrow:\n"
      "${_floe_pa_err}\nFix: run scripts/bootstrap to (re)install the project virtualenv.")
  endif()
  string(REPLACE "\n" ";" _floe_pa_out "${_floe_pa_out}")
  list(GET _floe_pa_out 0 FLOE_ARROW_VERSION)
  list(GET _floe_pa_out 1 _floe_pa_include)
  list(GET _floe_pa_out 2 _floe_pa_libdir)
  set(FLOE_ARROW_SOURCE "pyarrow wheel (${_floe_pa_libdir})")

  find_library(_floe_libarrow NAMES arrow PATHS "${_floe_pa_libdir}" NO_DEFAULT_PATH)
  find_library(_floe_libparquet NAMES parquet PATHS "${_floe_pa_libdir}" NO_DEFAULT_PATH)
  if(NOT _floe_libarrow OR NOT _floe_libparquet)
    message(FATAL_ERROR
      "pyarrow ${FLOE_ARROW_VERSION} at ${_floe_pa_libdir} has no libarrow/libparquet "
      "shared libraries (found: '${_floe_libarrow}', '${_floe_libparquet}').")
  endif()
  add_library(floe_arrow SHARED IMPORTED GLOBAL)
  set_target_properties(floe_arrow PROPERTIES
    IMPORTED_LOCATION "${_floe_libarrow}"
    INTERFACE_INCLUDE_DIRECTORIES "${_floe_pa_include}")
  add_library(floe_parquet SHARED IMPORTED GLOBAL)
  set_target_properties(floe_parquet PROPERTIES
    IMPORTED_LOCATION "${_floe_libparquet}"
    INTERFACE_INCLUDE_DIRECTORIES "${_floe_pa_include}"
    INTERFACE_LINK_LIBRARIES floe_arrow)
  # Binaries find the wheel's libraries with no LD_LIBRARY_PATH.
  list(APPEND CMAKE_BUILD_RPATH "${_floe_pa_libdir}")
  list(APPEND CMAKE_INSTALL_RPATH "${_floe_pa_libdir}")
endif()

string(REGEX MATCH "^[0-9]+" _floe_arrow_major "${FLOE_ARROW_VERSION}")
if(_floe_arrow_major LESS FLOE_MIN_ARROW_MAJOR)
  message(FATAL_ERROR
    "Arrow/Parquet C++ ${FLOE_ARROW_VERSION} from ${FLOE_ARROW_SOURCE} is too old: floe "
    "needs >= ${FLOE_MIN_ARROW_MAJOR}.0 (Parquet bloom-filter writing arrived in 24).\n"
    "Fix: run scripts/bootstrap (it installs pyarrow from requirements-dev.txt), or point "
    "-DArrow_DIR/-DParquet_DIR at a newer build.")
endif()
message(STATUS "floe: Arrow/Parquet C++ ${FLOE_ARROW_VERSION} from ${FLOE_ARROW_SOURCE}")

find_package(CLI11 CONFIG REQUIRED)
