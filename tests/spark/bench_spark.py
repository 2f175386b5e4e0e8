"""make bench-spark's Spark run (tests/bench-spark.sh): analyze_export on a
local master, the session started first, the analysis alone timed.
usage: bench_spark.py MASTER EXPORT OUT TOOL"""
import os
import sys
import time

os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession  # noqa: E402
from cloudprofiler import spark as cps  # noqa: E402

master, export, out, tool = sys.argv[1:5]
tmp = os.environ.get("TMPDIR", "/tmp")
s = (SparkSession.builder.master(master).appName("cloudprofiler bench")
     .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
     .config("spark.local.dir", tmp).config("spark.driver.extraJavaOptions", "-Djava.io.tmpdir=" + tmp)
     .getOrCreate())
s.sparkContext.setLogLevel("ERROR")
t = time.time()
res = cps.analyze_export(s, export, out, binary=tool, durations=False, capacity=False)
print("%.2f %d" % (time.time() - t, res["records"]))
s.stop()
