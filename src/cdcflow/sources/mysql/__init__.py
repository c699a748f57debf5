"""MySQL/MariaDB side of cdcflow. `sql.py` is the only module that imports the SQL driver."""
