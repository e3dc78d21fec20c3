// `flexiforce bench`: placeholder replaced below.
namespace ff {
int RunBenchCommand(int, char**) { return 1; }
}
