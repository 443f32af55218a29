# Repairs the imported targets of ROS 2 packages installed from PyPI wheels.
#
# The wheels' exported CMake targets list include directories of the machine that
# built them (/opt/python/cp311-cp311/...). CMake refuses to generate with
# non-existent include paths, so each such entry is replaced by this machine's
# Python and NumPy include directories. On a normal ROS 2 install no target has
# such paths and this file changes nothing. Include it after
# rosidl_generate_interfaces(), which imports the dependencies' targets.

find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)

get_directory_property(_focus_imported_targets IMPORTED_TARGETS)
foreach(_target IN LISTS _focus_imported_targets)
  get_target_property(_includes ${_target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _includes)
    continue()
  endif()
  set(_repaired "")
  set(_changed FALSE)
  foreach(_dir IN LISTS _includes)
    if(_dir MATCHES "^/opt/python/" AND NOT EXISTS "${_dir}")
      set(_changed TRUE)
      if(_dir MATCHES "numpy")
        list(APPEND _repaired ${Python3_NumPy_INCLUDE_DIRS})
      else()
        list(APPEND _repaired ${Python3_INCLUDE_DIRS})
      endif()
    else()
      list(APPEND _repaired "${_dir}")
    endif()
  endforeach()
  if(_changed)
    list(REMOVE_DUPLICATES _repaired)
    set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_repaired}")
  endif()
endforeach()
