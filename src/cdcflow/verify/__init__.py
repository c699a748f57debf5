"""Every source-vs-sink comparison (`cdcflow verify ...`), each reading the source independently of the capture.

report.py is the shared result; hbase.py compares HBase tables cell by cell (timestamps included),
mysql.py MySQL tables with change events, phoenix.py MySQL tables with their Phoenix copies.
"""
